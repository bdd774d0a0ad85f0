"""The text the tiny checkpoints' tokenizer is trained on.

Plain English about places and things, so that a trained tokenizer's tokens are
whole, readable words and a demo prompt such as "The Eiffel Tower is in" splits
into the words a reader expects.
"""

CORPUS = """
The Eiffel Tower is in Paris. Paris is the capital of France. The Louvre is in Paris too.
The Colosseum is in Rome. Rome is the capital of Italy. The Vatican is inside Rome.
Big Ben is in London. London is the capital of England. The Thames runs through London.
The Brandenburg Gate is in Berlin. Berlin is the capital of Germany.
The Sagrada Familia is in Barcelona. Madrid is the capital of Spain.
Mount Fuji is in Japan. Tokyo is the capital of Japan. Kyoto was the old capital.
The Great Wall is in China. Beijing is the capital of China.
The Statue of Liberty is in New York. Washington is the capital of the United States.
The Opera House is in Sydney. Canberra is the capital of Australia.
The Taj Mahal is in Agra. New Delhi is the capital of India.
The pyramids are in Egypt. Cairo is the capital of Egypt.
A cat sat on the mat. The dog ran in the park. The bird sang in the tree.
The sun rises in the east and sets in the west. The moon shines at night.
Water is wet. Fire is hot. Ice is cold. Snow is white. The sky is blue. Grass is green.
One, two, three, four, five, six, seven, eight, nine, ten.
Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday.
January, February, March, April, May, June, July, August, September, October, November, December.
The quick brown fox jumps over the lazy dog.
A model reads the prompt and predicts the next word. Each layer writes to the stream.
Attention looks back at earlier words. The lens shows what each layer would say.
She said that he was here. They said that we were there. It was a good day.
I think therefore I am. To be or not to be, that is the question.
The river flows to the sea. The mountain is tall and the valley is deep.
Red, orange, yellow, green, blue, indigo and violet are the colours of the rainbow.
The teacher gave a lesson. The student wrote an answer. The class was over.
"""
