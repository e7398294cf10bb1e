"""Pages and pictures: the lineage report, loss curves, the mask picture."""
