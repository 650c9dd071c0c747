"""The one child-process toolkit: spawning Python children that talk to their parent, running client tools, and cleaning up process trees."""
