"""Starlette glue shared by the SDK's HTTP servers (vf-serve, the weight receivers, the v1 toolset
servers): OpenAI-style JSON errors, bounded request bodies, header and body deadlines, the
bearer-key check and who a peer is. Only server code imports it (it needs starlette).
"""
