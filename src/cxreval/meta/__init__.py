"""Meta-evaluation: how far the engines and metrics agree with human judgement."""
