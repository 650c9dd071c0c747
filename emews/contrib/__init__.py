"""Small adapters that plug third-party optimizers into emews."""
