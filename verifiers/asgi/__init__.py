"""Starlette glue shared by the SDK's HTTP servers (vf-serve, the weight receivers): OpenAI-style
JSON errors and bounded request bodies. Only server code imports it (it needs starlette).
"""
