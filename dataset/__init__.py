"""Hugging Face dataset stage: schema, parquet shards, dataset card, publishing and loading."""
