"""A fictional encyclopedia, generated from a seed: countries, cities, rivers, universities,
people and companies, one short article each (about 3,000), with the facts linking them spread
over different articles, and questions whose answers take two or three of them to find.

Fictional on purpose: no model knows these facts from pretraining, so the only way to an answer
is to search the corpus. Names are unique across the whole world, so an answer is unambiguous.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

SYLLABLES = (
    "ka ri mo ten sal vor el dun bra mi zo lek an tor ves qui nor pha lum gar ost bel cy "
    "dra fen hal ir jor kel mar nev oth pel rus sil tam ul vin wer yor zan cal dor"
).split()
OCCUPATIONS = [
    "chemist",
    "painter",
    "engineer",
    "poet",
    "astronomer",
    "architect",
    "composer",
    "physician",
]
INDUSTRIES = {
    "shipbuilding": "cargo ships",
    "textiles": "woollen cloth",
    "optics": "telescopes",
    "printing": "printing presses",
    "brewing": "pale ale",
    "clockmaking": "pocket watches",
    "ceramics": "glazed tiles",
    "rail": "locomotives",
}
CURRENCIES = ["crown", "mark", "florin", "ducat", "thaler", "real", "guilder", "lira"]


def article(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


@dataclass
class World:
    docs: list[dict[str, Any]] = field(default_factory=list)  # {"id", "title", "text"}
    questions: list[dict[str, Any]] = field(default_factory=list)  # {"question", "answer", "docs"}


class _Names:
    """Unique invented names (never the same string twice in a world)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.used = rng, set()

    def __call__(self, parts: tuple[int, int] = (2, 3)) -> str:
        while True:
            name = "".join(
                self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(*parts))
            ).capitalize()
            if name not in self.used and len(name) > 3:
                self.used.add(name)
                return name


def build_world(seed: int = 0, people: int = 2000) -> World:
    """The same seed gives the same world (articles, ids and questions), on any machine."""
    rng = random.Random(seed)
    name = _Names(rng)
    world = World()
    countries = [{"name": name(), "currency": rng.choice(CURRENCIES)} for _ in range(40)]
    rivers = [{"name": name(), "cities": []} for _ in range(60)]
    cities = []
    for i in range(400):
        country = countries[i] if i < len(countries) else rng.choice(countries)  # none empty
        river = rng.choice(rivers)
        city = {
            "name": name(),
            "country": country,
            "river": river,
            "founded": rng.randint(800, 1700),
            "population": rng.randint(20, 900) * 1000,
        }
        river["cities"].append(city)
        cities.append(city)
    for country in countries:  # a capital in the country itself
        country["capital"] = rng.choice([c for c in cities if c["country"] is country])
    universities = [
        {
            "name": f"University of {name()}",
            "city": rng.choice(cities),
            "founded": rng.randint(1100, 1850),
        }
        for _ in range(120)
    ]
    first_names = [name((2, 2)) for _ in range(300)]  # shared; the surname makes a person unique
    persons = []
    for _ in range(people):
        first, last = rng.choice(first_names), name()
        born = rng.randint(1700, 1950)
        persons.append(
            {
                "name": f"{first} {last}",
                "born": born,
                "city": rng.choice(cities),
                "university": rng.choice(universities),
                "occupation": rng.choice(OCCUPATIONS),
            }
        )
    for city in cities:
        city["mayor"] = rng.choice(persons)
    companies = []
    for founder in rng.sample(persons, 500):
        industry = rng.choice(sorted(INDUSTRIES))
        companies.append(
            {
                "name": f"{name()} {rng.choice(['Works', 'Company', 'Brothers', 'Guild'])}",
                "founder": founder,
                "city": rng.choice(cities),
                "industry": industry,
                "founded": founder["born"] + rng.randint(20, 50),
            }
        )

    def add(title: str, text: str) -> str:
        doc_id = f"d{len(world.docs):04d}"
        world.docs.append({"id": doc_id, "title": title, "text": text})
        return doc_id

    for c in countries:
        c["doc"] = add(
            c["name"],
            f"{c['name']} is a country whose capital is {c['capital']['name']}. "
            f"Its currency is the {c['name']} {c['currency']}.",
        )
    for r in rivers:
        names = ", ".join(c["name"] for c in r["cities"][:4]) or "no large towns"
        r["doc"] = add(
            f"{r['name']} (river)",
            f"The {r['name']} is a river. Towns on its banks include {names}.",
        )
    for c in cities:
        c["doc"] = add(
            c["name"],
            f"{c['name']} is a city in {c['country']['name']}, on the {c['river']['name']} river. "
            f"It was founded in {c['founded']} and has about {c['population']:,} inhabitants. "
            f"Its mayor is {c['mayor']['name']}.",
        )
    for u in universities:
        u["doc"] = add(
            u["name"],
            f"The {u['name']} is a university in {u['city']['name']}, founded in {u['founded']}.",
        )
    for p in persons:  # no link back to a company: the company's article names its founder
        p["doc"] = add(
            p["name"],
            f"{p['name']} (born {p['born']}) is {article(p['occupation'])} from {p['city']['name']}. "
            f"{p['name'].split()[0]} studied at the {p['university']['name']}.",
        )
    for co in companies:
        co["doc"] = add(
            co["name"],
            f"{co['name']} is {article(co['industry'])} firm headquartered in {co['city']['name']}. "
            f"It was founded in {co['founded']} by {co['founder']['name']} and makes "
            f"{INDUSTRIES[co['industry']]}.",
        )

    for co in companies:
        options = company_questions(co)
        # one question per company, of a random kind, whose answer its own article does not name
        first, own_text = rng.randrange(len(options)), world.docs[int(co["doc"][1:])]["text"]
        for question, answer, entities in options[first:] + options[:first]:
            if not mentions(own_text, answer):
                world.questions.append(make_question(question, answer, entities))
                break
    mayors = {id(city["mayor"]) for city in cities}  # a mayor's city article names a country too
    for p in rng.sample([p for p in persons if id(p) not in mayors], 300):
        world.questions.append(
            make_question(
                f"In which country is the birthplace of {p['name']}?",
                p["city"]["country"]["name"],
                [p, p["city"]],
            )
        )
    rng.shuffle(world.questions)
    return world


def mentions(text: str, answer: Any) -> bool:
    return re.search(rf"\b{re.escape(str(answer))}\b", text) is not None


def make_question(question: str, answer: Any, entities: list[dict[str, Any]]) -> dict[str, Any]:
    return {"question": question, "answer": str(answer), "docs": [e["doc"] for e in entities]}


def company_questions(co: dict[str, Any]) -> list[tuple[str, Any, list[dict[str, Any]]]]:
    """Questions that start at a company's article and need one to three more (their path)."""
    founder, home, hq = co["founder"], co["founder"]["city"], co["city"]
    university = founder["university"]
    return [
        (
            f"In which country was the founder of {co['name']} born?",
            home["country"]["name"],
            [co, founder, home],
        ),
        (
            f"At which university did the founder of {co['name']} study?",
            university["name"],
            [co, founder],
        ),
        (
            f"Who is the mayor of the city where {co['name']} is headquartered?",
            hq["mayor"]["name"],
            [co, hq],
        ),
        (
            f"On which river is the city where {co['name']} is headquartered?",
            hq["river"]["name"],
            [co, hq],
        ),
        (
            f"In what year was the university attended by the founder of {co['name']} founded?",
            university["founded"],
            [co, founder, university],
        ),
        (
            f"What is the capital of the country where {co['name']} is headquartered?",
            hq["country"]["capital"]["name"],
            [co, hq, hq["country"]],
        ),
    ]
