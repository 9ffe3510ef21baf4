// KakinServer
