"""``stenoflow serve``: live captions over WebSocket, a browser page and OpenAI-compatible REST on one model."""
