"""The planner's rewrite rules, one per module; :data:`engine.planner.optimizer.RULES` orders them."""
