"""Evidence capture: what an agent claims to have seen, stored as checkable geometry (RAS, markups)."""
