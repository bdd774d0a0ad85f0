"""The widgets layer: state and rendering only; every answer comes from the session."""
