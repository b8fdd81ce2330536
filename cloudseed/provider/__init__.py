"""The provider side: the metadata server and the seed builder."""
