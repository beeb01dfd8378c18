"""What the results mean: speedups, inversions, headline figures, and the dispatch advice."""
