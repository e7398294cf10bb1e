"""Making the record's `.bin` shards from text: GPT-2 tokenizers offline, text to shards and a
whole shard folder, the built-in sample corpus."""
