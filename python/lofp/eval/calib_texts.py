"""The built-in calibration text of `lofp calibrate`: paragraphs written for lofp (original prose,
free of third-party text), on varied subjects and in varied registers -- narrative, instructions,
dialogue, numbers, a letter, a little code -- so that the statistics see more than one kind of
sentence. It shares no sentence and no eight-word run with the evaluation texts of
lofp.eval.texts (tests/python/test_calibrate.py checks), so a method tuned on it is not measured
on what it was tuned on."""

ENGLISH = """The workshop at the end of Quarry Lane opens at seven, when the first delivery van backs up to the loading door. Tomasz, who has run the place for nineteen years, likes to sweep the floor himself before the apprentices arrive, because he says a clean floor tells you where the day's mess will come from. On the long bench under the window lie three clocks waiting for new springs, a brass barometer with a cracked face and a wooden box of spare screws sorted by thread.

To repot a small lemon tree, water it the evening before so that the roots slide out in one piece. Choose a pot only a few centimetres wider than the old one, with a drainage hole, and put a layer of coarse grit at the bottom. Loosen the outer roots gently with your fingers, set the tree at the same depth it grew before, and fill around it with a free-draining compost. Press the soil down lightly, water until it runs from the base, and keep the tree out of strong sun for a week.

"Did you bring the map?" asked Priya, leaning over the railing of the ferry.
"I brought two," said her brother, "and neither of them shows the new harbour wall."
"Then we will have to ask someone who lives here."
"Or we could follow the people with the heaviest bags. They always know where the bus stops."

The survey counted 412 households in the valley, of which 137 kept goats, 58 kept bees and 21 kept both. Average rainfall over the last decade was 863 millimetres a year, but the driest year recorded only 540 and the wettest almost 1,200. Most families said the road to the market town, 27 kilometres away, was the single thing they would most like to see improved; a smaller number asked for a second bridge across the stream.

Dear Marguerite, thank you for the parcel of seeds, which arrived on Tuesday with only one packet torn. The beans went into the ground the same afternoon, and the radishes are already showing their first leaves. The weather has turned cold again, so I have covered the young plants with old curtains at night. I hope your knee is better and that you will visit in June, when the garden should finally look like something. With love from all of us, Elsie.

A prime number has exactly two divisors, one and itself. To test whether a number n is prime, it is enough to try dividing it by every integer from two up to the square root of n, because any factor larger than the square root must be paired with one smaller than it. For example, 91 looks prime at first glance, yet it equals seven times thirteen; 97, on the other hand, survives every trial division and is prime.

def mean(values):
    total = 0.0
    for v in values:
        total += v
    return total / len(values) if values else float("nan")

The night train to the coast leaves the central station at a quarter past eleven. Passengers with sleeping berths may board from half past ten, and a steward checks tickets at the door of each carriage. The dining car closes soon after departure, so most travellers bring a sandwich and a flask of tea. By dawn the train is running along the estuary, and those who wake early can watch the fishing boats come in against a pale grey sky.

Good soup begins with patience. Soften a chopped onion and two sticks of celery in butter over a low flame for a full ten minutes, until they are sweet but not brown. Add diced potato, a bay leaf and enough stock to cover, and simmer until the potato breaks when pressed against the side of the pan. Stir in a handful of chopped greens at the very end, season with salt and black pepper, and serve with thick slices of bread.

Engineers who design bridges must think about forces that change with time: the weight of traffic that comes and goes, wind that pushes from one side and then the other, and the slow expansion of steel on a summer afternoon. A bridge that is strong enough for a single heavy lorry may still fail if small vibrations keep repeating at just the wrong rhythm. For that reason, modern designs are tested with computer models long before the first foundation is poured.

When the power failed across the district, the library stayed open by candlelight. The librarian, a tall woman with silver rings on every finger, handed out torches to anyone who needed to find a shelf and read aloud from a book of sea stories to the children gathered on the carpet. Nobody seemed in a hurry to leave. When the lights came back two hours later, several people said they were almost disappointed.
"""
