"""Recorded data: a run's episodes recorded on device (`recording`), kept as Minari datasets
(`minari_format`), and flattened into transitions for the offline agents (`transitions`)."""
