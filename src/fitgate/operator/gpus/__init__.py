"""GPU inventory: nodes, DRA devices and claims, CEL selectors, cloud labels, placement, sharing, templates."""
