"""The offline corpus and its questions: a fictional encyclopedia generated from a seed.

Standalone (standard library only). A *world* is a set of entities (countries, cities, companies,
people) with typed relations, in three disjoint *regions*, one per split: an entity of the test
region is related only to test-region entities, so a held-out question's chain of lookups shares
no entity with any train question. All regions' articles share one corpus (one search index), and
near-namesake *distractor* articles (same name stem, other facts) sit beside the real ones.

Questions need 2-4 lookups: compositions (the founder's birthplace's country), comparisons (which
was founded first), and set questions (everyone working for a company based in a city). Each type
has three phrasings; train, dev and test use different phrasings (disjoint templates).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

REGIONS = ("train", "dev", "test")
SYL = ("ka", "lo", "mi", "ra", "ve", "tu", "sen", "dor", "bal", "ith", "quo", "zan", "pel", "mar",
       "gri", "fen", "hal", "or", "ul", "bre", "cas", "dun", "el", "vor", "tal", "nim", "sha", "yo")
FIRST = ("Ada", "Bram", "Cyra", "Dov", "Elin", "Faro", "Gita", "Hale", "Ines", "Joss", "Kael", "Lior",
         "Mira", "Nils", "Orla", "Pim", "Quin", "Rhea", "Sol", "Tarn", "Uma", "Vesna", "Wim", "Yara")
CURRENCIES = ("crown", "mark", "florin", "dinar", "talent", "sol", "real", "ducat", "thaler", "peso")
INDUSTRIES = ("shipbuilding", "software", "textiles", "brewing", "optics", "mining", "publishing", "rail")
SUFFIX = {"company": ("Works", "Holdings", "Labs", "Guild", "Industries", "Partners")}
NOISE = (
    "Local historians disagree about several details of its early records.",
    "The archive entry was last revised after a review by volunteer editors.",
    "Several spellings of the name appear in older documents.",
    "A short-lived newsletter once covered its activities in detail.",
    "Visitors often confuse it with similarly named places and firms.",
    "Its annual report is published in two languages.",
    "Sources from the period are sparse and sometimes contradictory.",
    "A commemorative plaque was unveiled decades later.",
)


@dataclass
class Entity:
    id: str             # document id, e.g. "D0042"
    kind: str           # country | city | company | person
    name: str
    region: str         # train | dev | test | distractor
    facts: dict = field(default_factory=dict)


@dataclass
class World:
    entities: dict[str, Entity]
    by_region: dict[str, dict[str, list[str]]]   # region -> kind -> ids

    def name(self, eid: str) -> str:
        return self.entities[eid].name


def _word(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(SYL) for _ in range(n)).capitalize()


def build_world(seed: int = 0, *, countries: int = 3, cities_per_country: int = 3, companies_per_city: int = 2,
                people_per_city: int = 4, distractor_share: float = 0.35) -> World:
    """Deterministic per seed: the same seed gives the same entities, facts and ids."""
    rng = random.Random(f"deepsearchqa-world-{seed}")
    used: set[str] = set()
    entities: dict[str, Entity] = {}

    def fresh(make) -> str:
        for _ in range(1000):
            name = make()
            if name not in used:
                used.add(name)
                return name
        raise RuntimeError("name space exhausted; lower the world size")

    def add(kind, name, region, **facts) -> str:
        eid = f"D{len(entities):04d}"
        entities[eid] = Entity(eid, kind, name, region, dict(facts))
        return eid

    by_region: dict[str, dict[str, list[str]]] = {}
    for region in REGIONS:
        kinds: dict[str, list[str]] = {"country": [], "city": [], "company": [], "person": []}
        for _ in range(countries):
            cname = fresh(lambda: _word(rng, 2) + rng.choice(("ia", "land", "stan", "ora")))
            country = add("country", cname, region, currency=rng.choice(CURRENCIES),
                          founded_year=rng.randint(1400, 1900))
            kinds["country"].append(country)
            cities = []
            for _ in range(cities_per_country):
                city = add("city", fresh(lambda: _word(rng, 2) + rng.choice(("", "burg", "ton", "mouth", "holm"))),
                           region, country=country, population=rng.randint(20, 2000) * 1000,
                           founded_year=rng.randint(900, 1850))
                cities.append(city)
                kinds["city"].append(city)
            entities[country].facts["capital"] = cities[0]
        for city in kinds["city"]:
            people = []
            for _ in range(people_per_city):
                pname = fresh(lambda: f"{rng.choice(FIRST)} {_word(rng, 2)}")
                people.append(add("person", pname, region, born_in=city, birth_year=rng.randint(1900, 1999)))
            kinds["person"].extend(people)
            for _ in range(companies_per_city):
                comp = add("company", fresh(lambda: f"{_word(rng, 2)} {rng.choice(SUFFIX['company'])}"), region,
                           headquarters=city, founded_year=rng.randint(1850, 2015),
                           industry=rng.choice(INDUSTRIES), founder=rng.choice(people))
                kinds["company"].append(comp)
        # employers: every person works for one company of the region (maybe in another city)
        for person in kinds["person"]:
            entities[person].facts["employer"] = rng.choice(kinds["company"])
        by_region[region] = kinds
    # distractors: near-namesakes with their own facts, pointing at real entities of any region
    all_real = [e for e in entities.values()]
    kinds_d: dict[str, list[str]] = {"country": [], "city": [], "company": [], "person": []}
    for ent in rng.sample(all_real, int(len(all_real) * distractor_share)):
        if ent.kind == "person":
            name = fresh(lambda: f"{ent.name.split()[0]} {ent.name.split()[1]}{rng.choice(('son', 'a', 'er'))}")
        elif ent.kind == "company":
            name = fresh(lambda: f"{ent.name} {rng.choice(('Group', 'International', 'Trust'))}")
        else:
            name = fresh(lambda: f"New {ent.name}" if rng.random() < 0.5 else f"{ent.name} {rng.choice(('Minor', 'Vale'))}")
        facts = dict(ent.facts)
        for key in ("population", "founded_year", "birth_year"):
            if key in facts:
                facts[key] = facts[key] + rng.choice((-7, -3, 2, 5, 11)) * (1000 if key == "population" else 1)
        kinds_d[ent.kind].append(add(ent.kind, name, "distractor", **facts))
    by_region["distractor"] = kinds_d
    return World(entities, by_region)


def _fmt_int(n: int) -> str:
    return f"{n:,}"


def render_article(world: World, eid: str, rng: random.Random) -> str:
    """An article: a lead sentence, facts in shuffled sentences, noise sentences between them."""
    e = world.entities[eid]
    n = world.name
    f = e.facts
    lines: list[str] = []
    if e.kind == "country":
        lead = f"{e.name} is a country whose capital is {n(f['capital'])}."
        lines += [f"The currency of {e.name} is the {f['currency']}.",
                  f"{e.name} became a sovereign state in {f['founded_year']}."]
        cities = sorted(c for c, ent in world.entities.items() if ent.kind == "city" and ent.facts.get("country") == eid)
        if cities:
            lines.append(f"Cities of {e.name} include {', '.join(n(c) for c in cities)}.")
    elif e.kind == "city":
        lead = f"{e.name} is a city in {n(f['country'])}."
        lines += [f"{e.name} has a population of {_fmt_int(f['population'])}.",
                  f"The city of {e.name} was founded in {f['founded_year']}."]
        based = sorted(c for c, ent in world.entities.items()
                       if ent.kind == "company" and ent.facts.get("headquarters") == eid and ent.region != "distractor")
        if based and e.region != "distractor":
            lines.append(f"Companies headquartered in {e.name}: {', '.join(n(c) for c in based)}.")
    elif e.kind == "company":
        lead = f"{e.name} is a {f['industry']} company headquartered in {n(f['headquarters'])}."
        lines += [f"{e.name} was founded in {f['founded_year']} by {n(f['founder'])}."]
        staff = sorted(p for p, ent in world.entities.items()
                       if ent.kind == "person" and ent.facts.get("employer") == eid and ent.region != "distractor")
        if staff and e.region != "distractor":
            lines.append(f"Notable employees of {e.name}: {', '.join(n(p) for p in staff)}.")
    else:
        lead = f"{e.name} (born {f['birth_year']}) is a person from {n(f['born_in'])}."
        lines += [f"{e.name} was born in the city of {n(f['born_in'])} in {f['birth_year']}.",
                  f"{e.name} works for {n(f['employer'])}."]
    body = lines + rng.sample(NOISE, 3)
    rng.shuffle(body)
    return " ".join([lead] + body)


def build_corpus(world: World, seed: int = 0) -> list[dict]:
    """Every entity's article: {"doc_id", "title", "text"}, in id order."""
    rng = random.Random(f"deepsearchqa-corpus-{seed}")
    return [{"doc_id": eid, "title": world.entities[eid].name, "text": render_article(world, eid, rng)}
            for eid in sorted(world.entities)]


# --- questions --------------------------------------------------------------------------------
# type -> three phrasings (train, dev, test). {x}, {y} are entity names.
TEMPLATES = {
    "founder_birth_country": (
        "In which country was the founder of {x} born?",
        "The person who founded {x} was born in a city. Which country is that city in?",
        "Name the country of birth of whoever founded the company {x}.",
    ),
    "employer_founded_year": (
        "In what year was the company that {x} works for founded?",
        "{x} is employed by a company. When was that company founded (year)?",
        "Give the founding year of {x}'s employer.",
    ),
    "hq_currency": (
        "What currency is used in the country where {x} is headquartered?",
        "{x} has its headquarters in some city. What is the currency of that city's country?",
        "Which currency circulates in the country hosting the head office of {x}?",
    ),
    "birth_city_population": (
        "What is the population of the city where {x} was born?",
        "{x} was born in a city. How many people live in that city?",
        "State the population of {x}'s birthplace.",
    ),
    "older_company": (
        "Which was founded earlier, {x} or {y}?",
        "Of {x} and {y}, which company is older?",
        "Between {x} and {y}, name the company with the earlier founding year.",
    ),
    "older_person": (
        "Who was born earlier, {x} or {y}?",
        "Of {x} and {y}, which person is older?",
        "Between {x} and {y}, name the one with the earlier birth year.",
    ),
    "city_employees": (
        "List all notable employees of companies headquartered in {x}.",
        "Which people are notable employees of the companies based in {x}? Give them all.",
        "Name every notable employee of any company whose headquarters is in {x}.",
    ),
}
TYPE_HOPS = {"founder_birth_country": 3, "employer_founded_year": 2, "hq_currency": 3,
             "birth_city_population": 2, "older_company": 2, "older_person": 2, "city_employees": 3}


def _q(world: World, qtype: str, region: str, rng: random.Random) -> dict | None:
    """One question of a type about the region's entities: question fields and the lookup chain."""
    E = world.entities
    ids = world.by_region[region]
    pick = rng.choice
    if qtype == "founder_birth_country":
        c = pick(ids["company"]); founder = E[c].facts["founder"]; city = E[founder].facts["born_in"]
        country = E[city].facts["country"]
        return dict(x=c, answer=[E[country].name], chain=[c, founder, city, country])
    if qtype == "employer_founded_year":
        p = pick(ids["person"]); comp = E[p].facts["employer"]
        return dict(x=p, answer=[str(E[comp].facts["founded_year"])], chain=[p, comp])
    if qtype == "hq_currency":
        c = pick(ids["company"]); city = E[c].facts["headquarters"]; country = E[city].facts["country"]
        return dict(x=c, answer=[E[country].facts["currency"]], chain=[c, city, country])
    if qtype == "birth_city_population":
        p = pick(ids["person"]); city = E[p].facts["born_in"]
        return dict(x=p, answer=[_fmt_int(E[city].facts["population"])], chain=[p, city])
    if qtype in ("older_company", "older_person"):
        kind, key = ("company", "founded_year") if qtype == "older_company" else ("person", "birth_year")
        a, b = rng.sample(ids[kind], 2)
        if E[a].facts[key] == E[b].facts[key]:
            return None
        win = a if E[a].facts[key] < E[b].facts[key] else b
        return dict(x=a, y=b, answer=[E[win].name], chain=[a, b])
    if qtype == "city_employees":
        city = pick(ids["city"])
        comps = sorted(c for c in ids["company"] if E[c].facts["headquarters"] == city)
        staff = sorted(p for p in ids["person"] if E[p].facts["employer"] in comps)
        if not staff or len(staff) > 6:
            return None
        return dict(x=city, answer=[E[p].name for p in staff], chain=[city, *comps], list=True)
    raise ValueError(qtype)


def build_questions(world: World, split: str, n: int, seed: int) -> list[dict]:
    """n questions of the split: its region's entities, its phrasing of every type, no repeats."""
    phrasing = REGIONS.index(split)
    rng = random.Random(f"deepsearchqa-questions-{split}-{seed}")
    types = sorted(TEMPLATES)
    out: list[dict] = []
    seen: set[str] = set()
    misses = dict.fromkeys(types, 0)     # a type whose draws keep repeating is used up
    turn = 0
    while len(out) < n:
        live = [t for t in types if misses[t] < 60]
        if not live:
            raise RuntimeError(f"could not draw {n} distinct {split} questions; enlarge the world")
        qtype = live[turn % len(live)]
        q = _q(world, qtype, split, rng)
        text = q and TEMPLATES[qtype][phrasing].format(x=world.name(q["x"]), y=world.name(q["y"]) if "y" in q else "")
        if q is None or text in seen:
            misses[qtype] += 1
            continue
        turn += 1
        seen.add(text)
        out.append({"id": f"dsqa-{split}-{len(out):04d}", "question": text, "answers": q["answer"],
                    "answer_type": "list" if q.get("list") else "single", "question_type": qtype,
                    "subjects": [world.name(q[k]) for k in ("x", "y") if k in q],
                    "template": f"{qtype}/{phrasing}", "hops": TYPE_HOPS[qtype], "chain": q["chain"]})
    return out
