"""An example crabray plugin; crabray finds its parts through entry points, never by import."""
