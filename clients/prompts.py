"""The bundled English prompt set of the load tester: short, medium and long texts.

Short prompts are one clause or sentence (a voice assistant's reply), medium ones a
few sentences (a paragraph of an answer), long ones about 200 words (an article
read aloud). Every prompt is distinct, so no cache can make a repeated text cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Prompt:
    category: str
    """"short", "medium", "long", or "file" for prompts read from a text file."""
    text: str

    @property
    def words(self) -> int:
        return len(self.text.split())


SHORT = (
    "Hello, how can I help you today?",
    "Your meeting starts in ten minutes.",
    "Turn left at the next traffic light.",
    "The package was delivered this morning.",
    "It will rain later, so take an umbrella.",
    "Sorry, I did not catch that. Could you say it again?",
    "Your order number is four, seven, two, nine.",
    "The kitchen timer is done.",
)

MEDIUM = (
    "Thanks for calling. Our office is open from nine in the morning until six in the evening, Monday to Friday. "
    "If you would like to leave a message, please speak after the tone and we will call you back as soon as we can.",
    "The train to the airport leaves from platform four every twenty minutes. The journey takes about half an hour, "
    "and tickets can be bought from the machines near the entrance or from the conductor on board.",
    "To reset your password, open the settings page and choose security. Enter the code we sent to your phone, "
    "then type your new password twice. It must be at least twelve characters long.",
    "Tomorrow will start cloudy with a light breeze from the west. By the afternoon the sun should break through, "
    "and temperatures will climb to around twenty degrees before a cool, clear night.",
    "Preheat the oven to two hundred degrees. Mix the flour, sugar and butter until the dough is smooth, "
    "then roll it out, cut it into small circles, and bake them for twelve minutes until golden.",
    "The library will close early on Friday for maintenance. Books due that day can be returned on Saturday "
    "without a fine, and the reading room will reopen at the usual time next week.",
)

LONG = (
    "Early in the morning the city was still quiet. A few delivery vans moved slowly through the narrow streets, "
    "and the bakeries had just opened their doors. The smell of fresh bread drifted across the square, where an "
    "old man was feeding pigeons from a paper bag. By seven o'clock the first commuters appeared, hurrying towards "
    "the station with coffee in their hands. Buses filled up, bicycles appeared at every corner, and the traffic "
    "lights began their long day of changing colours. In the park, a group of runners passed the fountain for the "
    "third time, while a woman with two dogs tried to keep them away from the ducks. Shops raised their shutters one "
    "after another. A street musician unpacked his violin near the museum and started with a slow, familiar tune. "
    "Tourists gathered around him, taking pictures and dropping coins into his case. At the school on the hill, "
    "children ran through the gates as the bell rang. Teachers greeted them by name. By nine, the city was fully "
    "awake, loud and busy, as if the quiet hour before dawn had never existed at all. Later that afternoon, clouds "
    "rolled in from the sea, and the first drops of rain sent everyone looking for shelter under the awnings.",
    "The lighthouse stood on a rock at the edge of the bay, and for more than a hundred years its keeper had climbed "
    "the same spiral stairs every evening to light the lamp. The last keeper was a patient woman named Ruth, who kept "
    "a notebook of every ship she saw pass. In winter the storms came in from the north, throwing spray against the "
    "windows of the lamp room, and she would sit up through the night to make sure the light never failed. In summer "
    "the sea was calm and blue, and children from the village rowed out to visit her, asking to see the great glass "
    "lens. She showed them how it turned, how it gathered the small flame into a beam that reached twenty miles out "
    "to sea, and how sailors counted the flashes to know exactly where they were. When the light was finally made "
    "automatic, Ruth moved to a cottage on the shore. Every evening she still watched the beam sweep across the water, "
    "and every evening she wrote one more line in her notebook, as she had always done, before she went to sleep.",
    "Building a small garden on a city balcony takes less space than most people think. Start by watching how the "
    "sun moves across the balcony during the day, because most vegetables need at least six hours of direct light. "
    "Tomatoes, peppers and beans love the sun, while lettuce, spinach and herbs such as mint and parsley are happy "
    "with a little shade. Choose containers with holes in the bottom so that water can drain, and fill them with a "
    "light potting mix rather than soil from the ground, which becomes hard and heavy in pots. Water in the early "
    "morning, when the air is cool, and check the soil with a finger before you water again. In hot weather, small "
    "pots may need water twice a day. A few flowers among the vegetables will bring bees, which help the plants set "
    "fruit. Feed the plants every two weeks during the summer, pick the leaves and fruit often to keep new growth "
    "coming, and keep a notebook of what worked. By the end of the first season you will know your balcony well, "
    "and the second year will be even better than the first.",
)

CATEGORIES = {"short": SHORT, "medium": MEDIUM, "long": LONG}


def bundled(categories: tuple[str, ...] | list[str] = ("short", "medium", "long")) -> list[Prompt]:
    """The bundled prompts of the given categories, interleaved so that a run mixes lengths."""
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown:
        raise ValueError(f"unknown prompt categories {unknown}; choose from {', '.join(CATEGORIES)}")
    lists = [[Prompt(c, t) for t in CATEGORIES[c]] for c in categories]
    mixed = []
    for i in range(max(len(texts) for texts in lists)):
        mixed += [texts[i] for texts in lists if i < len(texts)]
    return mixed


def from_file(path: str | Path, split: str = "paragraphs") -> list[Prompt]:
    """Prompts read from a UTF-8 text file: one per blank-line-separated paragraph, or one per line."""
    text = Path(path).read_text(encoding="utf-8")
    if split == "lines":
        pieces = text.splitlines()
    elif split == "paragraphs":
        pieces = [" ".join(block.split()) for block in text.replace("\r\n", "\n").split("\n\n")]
    else:
        raise ValueError(f"split must be 'lines' or 'paragraphs', not {split!r}")
    prompts = [Prompt("file", piece.strip()) for piece in pieces if piece.strip()]
    if not prompts:
        raise ValueError(f"{path} holds no text")
    return prompts
