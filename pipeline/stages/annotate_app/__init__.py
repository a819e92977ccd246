"""The annotation server of `foilforge annotate serve`: a FastAPI app on SQLite (WAL), and its page."""
