"""Child processes the SDK launches (vf-serve, vLLM, the hub in tests): started, waited for until
they answer, and never outliving the process that started them.
"""
