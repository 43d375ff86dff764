"""Watches: the node, DRA and node-template list-watches that keep the GPU inventory current."""
