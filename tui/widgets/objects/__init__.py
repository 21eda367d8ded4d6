"""The RM object tree per client."""
