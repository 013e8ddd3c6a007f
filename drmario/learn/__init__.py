"""Learning: input planes (`encode`), the JSON training examples (`examples`), compact data sets
(`dataset`), the residual network and its loss (`net`), and the trainer (`train`)."""
