"""Built-in evaluation texts. The first three paragraphs of chapter I of Lewis Carroll's
"Alice's Adventures in Wonderland" (1865, public domain), followed by paragraphs written for
lofp, so that part of the text is certainly outside any training set."""

ENGLISH = """Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do: once or twice she had peeped into the book her sister was reading, but it had no pictures or conversations in it, 'and what is the use of a book,' thought Alice 'without pictures or conversations?'

So she was considering in her own mind (as well as she could, for the hot day made her feel very sleepy and stupid), whether the pleasure of making a daisy-chain would be worth the trouble of getting up and picking the daisies, when suddenly a White Rabbit with pink eyes ran close by her.

There was nothing so very remarkable in that; nor did Alice think it so very much out of the way to hear the Rabbit say to itself, 'Oh dear! Oh dear! I shall be late!' (when she thought it over afterwards, it occurred to her that she ought to have wondered at this, but at the time it all seemed quite natural); but when the Rabbit actually took a watch out of its waistcoat-pocket, and looked at it, and then hurried on, Alice started to her feet, for it flashed across her mind that she had never before seen a rabbit with either a waistcoat-pocket, or a watch to take out of it, and burning with curiosity, she ran across the field after it, and fortunately was just in time to see it pop down a large rabbit-hole under the hedge.

On the morning of the fair the whole village woke early. The baker carried his bread to the square, the children ran between the carts, and an old man sat by the well and told anyone who would listen that it was going to rain before noon. Nobody believed him, and by the time the music began the sky was clear and blue.

The river that runs past the mill is wide and slow in summer, but in spring it rises quickly and carries branches, leaves and sometimes a whole tree down towards the sea. The miller keeps a boat tied to a post near the door, and when the water is high he rows across to the other bank to buy flour, salt and news from the town.
"""

PORTUGUESE = """Numa manhã de inverno o rapaz saiu de casa antes do sol. A rua estava vazia, as janelas ainda fechadas, e só se ouvia o barulho da água que corria pela calçada. Ele levava no bolso uma carta da mãe e um pedaço de pão, e pensava no que diria ao tio quando chegasse à cidade.

O tio morava numa casa grande perto do rio, com um jardim cheio de árvores antigas. Era um homem calado, que gostava de livros e de conversas longas à noite, depois do jantar. Quando viu o sobrinho na porta, sorriu, abriu os braços e mandou preparar o quarto que dava para o quintal.
"""

# Sentences for the embedding models: pairs that belong together and sentences that do not.
SENTENCES = [
    "A man is playing a guitar on the stage.",
    "Someone performs music with a string instrument.",
    "The quick brown fox jumps over the lazy dog.",
    "A dog is running through the snow in the park.",
    "The stock market fell sharply after the announcement.",
    "Shares dropped quickly when the news came out.",
    "How do I reset my password?",
    "I forgot my login credentials and cannot sign in.",
    "The recipe needs two eggs, flour and a cup of milk.",
    "Photosynthesis turns light, water and carbon dioxide into sugar.",
]
