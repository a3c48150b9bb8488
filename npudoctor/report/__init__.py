"""Renderers: reports to text for people and machines. No thresholds, no decisions here."""
