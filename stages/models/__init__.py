"""Model families, one subpackage each."""
