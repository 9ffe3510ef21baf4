// AppStoreClient
