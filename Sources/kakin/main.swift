print("kakin")
