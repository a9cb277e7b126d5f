"""Studying the strategies: learners simulated in one process, and the papers' claims measured."""
