"""Robot descriptions -> dynamics Models."""
