"""Pure file formats: readers and writers of the files the platform reads and writes."""
