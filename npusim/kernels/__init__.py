"""Reference kernels, written as teaching material: vector add, softmax, matmul (and, later, conv2d).

They use only the public ``npusim`` API, exactly as a learner's kernel would.
"""
