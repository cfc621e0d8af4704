"""``python -m cxreval`` runs the command line."""

from cxreval.cli import app

app(prog_name="cxreval")
