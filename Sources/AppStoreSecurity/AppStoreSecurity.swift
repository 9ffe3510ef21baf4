// AppStoreSecurity
