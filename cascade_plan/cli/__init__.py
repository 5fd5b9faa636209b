"""The command line: each command loads, calls the library, renders."""
