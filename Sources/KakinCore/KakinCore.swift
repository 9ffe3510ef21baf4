// KakinCore
