"""WebShop (Level 3): shopping from instructions in a text-mode web store, offline."""
