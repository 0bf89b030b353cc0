"""arith (Level 1): generated word problems (generator.py) and the built-in `tiny` model pretrained
from the generator's train-only question space (tiny_model.py)."""
