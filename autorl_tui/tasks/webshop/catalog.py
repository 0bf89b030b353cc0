"""The generated WebShop catalog and its instructions (goals), deterministic per seed.

Standard library only. A product is a dict shaped like the official WebShop product records:
`asin, name (its type, e.g. "dark chocolate bar"), category, product_category ("A › B › C"),
query (the type's search phrase), title, price, attributes, options {name: [values]}, features,
description`. A goal is built from one target product: some of its attributes, one value of each
of its option groups, and a price bound above its price (WebShop's rule: two of the first four
multiples of ten above the price, the larger one), and reads as a paraphrased instruction.
"""

from __future__ import annotations

import random

# type name -> (category, category path, attribute pool, option groups, price range, title words)
TYPES: dict[str, dict] = {
    "dark chocolate bar": dict(
        category="grocery", path="Grocery & Gourmet Food › Snacks & Sweets › Chocolate",
        attrs=["gluten free", "sugar free", "organic", "non gmo", "dairy free", "keto friendly", "fair trade"],
        options={"flavor": ["sea salt", "almond", "orange", "mint", "raspberry", "caramel"],
                 "size": ["3.5 ounce (pack of 6)", "3.5 ounce (pack of 12)", "1.4 ounce (pack of 10)"]},
        price=(4, 45), words=["Premium", "Artisan", "Smooth", "Rich"]),
    "coffee beans": dict(
        category="grocery", path="Grocery & Gourmet Food › Beverages › Coffee",
        attrs=["organic", "fair trade", "low acid", "kosher", "non gmo", "single origin"],
        options={"roast": ["light roast", "medium roast", "dark roast", "espresso roast"],
                 "size": ["12 ounce", "2 pound", "5 pound"]},
        price=(8, 60), words=["Whole Bean", "Fresh Roasted", "Specialty"]),
    "green tea": dict(
        category="grocery", path="Grocery & Gourmet Food › Beverages › Tea",
        attrs=["organic", "caffeine free", "sugar free", "non gmo", "kosher", "gluten free"],
        options={"flavor": ["jasmine", "matcha", "lemon ginger", "peach", "honey"],
                 "size": ["20 count (pack of 6)", "100 count", "40 count"]},
        price=(5, 35), words=["Loose Leaf", "Premium", "Antioxidant"]),
    "protein bar": dict(
        category="grocery", path="Grocery & Gourmet Food › Snacks & Sweets › Nutrition Bars",
        attrs=["gluten free", "low sugar", "high protein", "keto friendly", "plant based", "soy free"],
        options={"flavor": ["peanut butter", "chocolate chip", "cookie dough", "birthday cake", "coconut"],
                 "size": ["12 count", "20 count", "4 count"]},
        price=(10, 50), words=["Whey", "Snack", "Meal Replacement"]),
    "olive oil": dict(
        category="grocery", path="Grocery & Gourmet Food › Pantry › Oils",
        attrs=["extra virgin", "organic", "cold pressed", "non gmo", "kosher"],
        options={"size": ["16.9 fl oz", "33.8 fl oz", "1 gallon"]},
        price=(9, 70), words=["Italian", "Greek", "Spanish", "Mediterranean"]),
    "shampoo": dict(
        category="beauty", path="Beauty & Personal Care › Hair Care › Shampoo",
        attrs=["sulfate free", "paraben free", "cruelty free", "natural ingredients", "color safe", "dry hair"],
        options={"scent": ["coconut", "lavender", "tea tree", "argan oil", "unscented"],
                 "size": ["8 fl oz", "16 fl oz", "32 fl oz"]},
        price=(6, 40), words=["Moisturizing", "Volumizing", "Salon", "Daily"]),
    "face moisturizer": dict(
        category="beauty", path="Beauty & Personal Care › Skin Care › Face",
        attrs=["fragrance free", "oil free", "hyaluronic acid", "sensitive skin", "cruelty free", "anti aging"],
        options={"size": ["1.7 ounce", "2.5 ounce", "4 ounce"]},
        price=(8, 75), words=["Daily", "Hydrating", "Lightweight", "Night"]),
    "lipstick": dict(
        category="beauty", path="Beauty & Personal Care › Makeup › Lips",
        attrs=["long lasting", "cruelty free", "vegan", "waterproof", "paraben free"],
        options={"color": ["ruby red", "nude pink", "coral", "berry", "mauve", "classic red"]},
        price=(5, 35), words=["Matte", "Satin", "Velvet", "Creamy"]),
    "body wash": dict(
        category="beauty", path="Beauty & Personal Care › Bath & Body › Body Wash",
        attrs=["sulfate free", "natural ingredients", "sensitive skin", "paraben free", "dermatologist tested"],
        options={"scent": ["eucalyptus", "vanilla", "citrus", "lavender", "oatmeal"],
                 "size": ["12 fl oz (pack of 2)", "16 fl oz", "22 fl oz"]},
        price=(5, 30), words=["Gentle", "Refreshing", "Nourishing"]),
    "men's t-shirt": dict(
        category="fashion", path="Clothing, Shoes & Jewelry › Men › Clothing › Shirts",
        attrs=["machine wash", "cotton", "slim fit", "moisture wicking", "short sleeve"],
        options={"color": ["black", "navy blue", "heather grey", "white", "olive green"],
                 "size": ["small", "medium", "large", "x-large", "xx-large"]},
        price=(8, 40), words=["Crew Neck", "Classic", "Athletic", "Everyday"]),
    "women's running shoes": dict(
        category="fashion", path="Clothing, Shoes & Jewelry › Women › Shoes › Athletic",
        attrs=["non slip", "lightweight", "breathable", "rubber sole", "memory foam"],
        options={"color": ["black white", "pink", "grey", "blue", "purple"],
                 "size": ["6", "7", "7.5", "8", "8.5", "9", "10"]},
        price=(25, 120), words=["Walking", "Trail", "Cushioned", "Sport"]),
    "hoodie": dict(
        category="fashion", path="Clothing, Shoes & Jewelry › Men › Clothing › Sweatshirts",
        attrs=["fleece lined", "machine wash", "relaxed fit", "long sleeve", "cotton"],
        options={"color": ["black", "charcoal", "maroon", "forest green", "royal blue"],
                 "size": ["small", "medium", "large", "x-large"]},
        price=(18, 70), words=["Pullover", "Zip Up", "Heavyweight", "Casual"]),
    "wool socks": dict(
        category="fashion", path="Clothing, Shoes & Jewelry › Men › Clothing › Socks",
        attrs=["moisture wicking", "machine wash", "cushioned", "merino wool", "odor resistant"],
        options={"color": ["assorted", "grey", "brown", "black"],
                 "size": ["medium", "large", "x-large"]},
        price=(9, 45), words=["Hiking", "Thermal", "Crew", "Boot"]),
    "wireless earbuds": dict(
        category="electronics", path="Electronics › Headphones › Earbud Headphones",
        attrs=["noise cancelling", "water resistant", "fast charging", "long battery life", "bluetooth 5.3"],
        options={"color": ["black", "white", "navy", "rose gold"]},
        price=(15, 150), words=["True Wireless", "Sport", "Stereo", "Mini"]),
    "phone case": dict(
        category="electronics", path="Electronics › Cell Phones & Accessories › Cases",
        attrs=["shockproof", "slim", "wireless charging compatible", "scratch resistant", "kickstand"],
        options={"color": ["clear", "black", "midnight blue", "lavender", "red"],
                 "model": ["iphone 15", "iphone 15 pro", "galaxy s24", "pixel 8"]},
        price=(7, 40), words=["Protective", "Rugged", "Thin", "Hybrid"]),
    "usb c cable": dict(
        category="electronics", path="Electronics › Computers & Accessories › Cables",
        attrs=["fast charging", "braided", "high speed", "durable"],
        options={"length": ["3 ft", "6 ft", "10 ft"], "size": ["pack of 2", "pack of 3", "single"]},
        price=(5, 30), words=["Nylon", "Charger", "Data Sync"]),
    "bluetooth speaker": dict(
        category="electronics", path="Electronics › Portable Audio & Video › Speakers",
        attrs=["waterproof", "portable", "long battery life", "stereo sound", "built in microphone"],
        options={"color": ["black", "blue", "red", "teal"]},
        price=(20, 160), words=["Outdoor", "Mini", "Party", "Loud"]),
    "bath towel": dict(
        category="home", path="Home & Kitchen › Bath › Towels",
        attrs=["cotton", "quick dry", "highly absorbent", "machine wash", "soft"],
        options={"color": ["white", "grey", "navy", "sage green", "beige"],
                 "size": ["set of 2", "set of 4", "set of 6"]},
        price=(12, 70), words=["Luxury", "Hotel", "Plush", "Turkish"]),
    "throw pillow cover": dict(
        category="home", path="Home & Kitchen › Bedding › Decorative Pillows",
        attrs=["velvet", "hidden zipper", "machine wash", "double sided", "soft"],
        options={"color": ["mustard", "teal", "blush pink", "charcoal", "cream"],
                 "size": ["18 x 18 inch", "20 x 20 inch", "12 x 20 inch"]},
        price=(8, 40), words=["Decorative", "Modern", "Boho", "Farmhouse"]),
    "scented candle": dict(
        category="home", path="Home & Kitchen › Home Decor › Candles",
        attrs=["soy wax", "long lasting", "lead free", "natural ingredients", "hand poured"],
        options={"scent": ["vanilla", "lavender", "sandalwood", "fresh linen", "pumpkin spice"],
                 "size": ["8 ounce", "14 ounce", "3 pack"]},
        price=(9, 50), words=["Aromatherapy", "Jar", "Luxury", "Cozy"]),
    "bed sheets": dict(
        category="home", path="Home & Kitchen › Bedding › Sheets",
        attrs=["deep pocket", "cotton", "breathable", "wrinkle free", "machine wash"],
        options={"color": ["white", "light grey", "navy", "ivory", "sage"],
                 "size": ["twin", "full", "queen", "king"]},
        price=(20, 110), words=["Hotel Luxury", "Soft", "Cooling", "Percale"]),
}

BRANDS = ["Amberly", "Northpeak", "Vellora", "Kestrel & Co", "Bramblewood", "Solvane", "Orchid Lane",
          "Tidewell", "Copperfield", "Lumina", "Greystone", "Maple Hollow", "Zephyra", "Harbor Goods",
          "Everkind", "Pinecrest", "Nuvio", "Silverleaf", "Bold Fox", "Quillon"]

PRICE_GRID = [10.0 * i for i in range(1, 100)]

TEMPLATES = [
    "i need {a}{attrs} {name}{opts}, and price lower than {price} dollars",
    "i am looking for {a}{attrs} {name}{opts}, and price lower than {price} dollars",
    "find me {a}{attrs} {name}{opts}, and price lower than {price} dollars",
    "i want to buy {a}{attrs} {name}{opts}, and price lower than {price} dollars",
    "i'm searching for {a}{attrs} {name}{opts}, and price lower than {price} dollars",
]


ID_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"


def _asin(rng: random.Random, id_chars: int = 8) -> str:
    return "B0" + "".join(rng.choice(ID_CHARS) for _ in range(id_chars))


def _title_case(phrase: str) -> str:
    return " ".join(w if w[:1].isdigit() else w[:1].upper() + w[1:] for w in phrase.split())


def generate_products(seed: int = 0, per_type: int = 50, id_chars: int = 8) -> list[dict]:
    """`per_type` products of each type in TYPES: a brand, 2-3 attributes, a subset of each option
    group's values, a price; titles read like listings ("Northpeak Premium Gluten Free Organic Dark
    Chocolate Bar, Fair Trade"). Ids are ASIN-like, "B0" and `id_chars` characters (8 as Amazon's;
    fewer make a smaller id space: 2 give 1,156 ids, which tiny-webshop's tokenizer has as tokens)."""
    if len(ID_CHARS) ** id_chars < 2 * per_type * len(TYPES):
        raise ValueError(f"{id_chars} id characters give too few ids for {per_type * len(TYPES)} products")
    rng = random.Random(seed)
    products, seen = [], set()
    for name, spec in TYPES.items():
        for _ in range(per_type):
            asin = _asin(rng, id_chars)
            while asin in seen:
                asin = _asin(rng, id_chars)
            seen.add(asin)
            attrs = rng.sample(spec["attrs"], rng.choice([2, 3]))
            options = {}
            for group, values in spec["options"].items():
                k = max(2, len(values) - rng.randint(0, 1))
                options[group] = sorted(rng.sample(values, k), key=values.index)
            lo, hi = spec["price"]
            price = round(rng.uniform(lo, hi), 2)
            brand = rng.choice(BRANDS)
            word = rng.choice(spec["words"])
            head = " ".join(_title_case(a) for a in attrs[:2])
            title = f"{brand} {word} {head} {_title_case(name)}"
            if len(attrs) > 2:
                title += f", {_title_case(attrs[2])}"
            features = [f"{_title_case(a)}: made to be {a}, as our customers expect." for a in attrs]
            features.append(f"{word} {name} by {brand}.")
            description = (f"The {brand} {name} is {', '.join(attrs)}. "
                           f"Available in {sum(len(v) for v in options.values())} variations.")
            products.append({
                "asin": asin, "name": name, "category": spec["category"], "product_category": spec["path"],
                "query": name, "title": title, "price": price, "attributes": attrs, "options": options,
                "features": features, "description": description, "rating": round(rng.uniform(3.0, 5.0), 1),
            })
    rng.shuffle(products)
    return products


def price_bound(price: float, rng: random.Random) -> float:
    above = [p for p in PRICE_GRID if p > price][:4]
    if len(above) < 2:
        return 1_000_000.0
    return sorted(rng.sample(above, 2))[1]


def make_goal(product: dict, rng: random.Random, goal_id: str) -> dict:
    n_attrs = rng.choice([1, 2, 2, 3]) if len(product["attributes"]) >= 3 else rng.choice([1, 2])
    attrs = rng.sample(product["attributes"], min(n_attrs, len(product["attributes"])))
    goal_options = {g: rng.choice(vals) for g, vals in product["options"].items()}
    upper = price_bound(product["price"], rng)
    opt_style = rng.randrange(3)
    if not goal_options:
        opts = ""
    elif opt_style == 0:
        opts = " with " + ", and ".join(f"{g}: {v}" for g, v in goal_options.items())
    elif opt_style == 1:
        opts = " in " + " and ".join(f"{v} {g}" for g, v in goal_options.items())
    else:
        opts = ", " + ", ".join(f"{g} {v}" for g, v in goal_options.items())
    name = product["name"]
    article = "" if name.endswith("s") and not name.endswith("ss") else "a "
    text = rng.choice(TEMPLATES).format(a=article, attrs=" ".join(attrs), name=name, opts=opts,
                                        price=f"{upper:.2f}")
    return {"id": goal_id, "asin": product["asin"], "category": product["category"], "query": product["query"],
            "name": product["name"], "product_category": product["product_category"], "instruction": text,
            "attributes": attrs, "goal_options": goal_options, "price_upper": upper}


def partition(products: list[dict], seed: int, fractions: dict[str, float]) -> dict[str, list[dict]]:
    """Disjoint target products per split: products shuffled with `seed`; each split named in
    `fractions` (in order) gets its share, the last one what remains."""
    order = sorted(products, key=lambda p: p["asin"])
    random.Random(seed).shuffle(order)
    parts, start = {}, 0
    names = list(fractions)
    for i, split in enumerate(names):
        end = len(order) if i == len(names) - 1 else start + int(round(fractions[split] * len(order)))
        parts[split] = order[start:end]
        start = end
    return parts


def make_goals(targets: list[dict], n: int, seed: int, prefix: str) -> list[dict]:
    """n goals over the split's target products (each target used at most once while possible)."""
    rng = random.Random(seed)
    pool = list(targets)
    rng.shuffle(pool)
    goals = []
    for i in range(n):
        goals.append(make_goal(pool[i % len(pool)], rng, f"{prefix}-{i:04d}"))
    return goals
