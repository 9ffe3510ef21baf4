// KakinStorage
