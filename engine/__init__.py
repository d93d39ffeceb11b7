"""A declarative, config-driven batch data-integration engine on Apache Spark."""

__version__ = "0.1.0"
