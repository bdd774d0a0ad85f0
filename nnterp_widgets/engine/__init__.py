"""The engine layer: `StandardizedVLLM` on a real vLLM engine, CPU or GPU."""
