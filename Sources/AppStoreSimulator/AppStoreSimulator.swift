// AppStoreSimulator
