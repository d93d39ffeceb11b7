"""Platform tricks: what the engine does to the JVM, Python or the OS only to be faster or to
survive the platform's traps, each in one module saying what it buys (measured) and how to turn it
off. Business code calls them; none of them changes what a run publishes."""
