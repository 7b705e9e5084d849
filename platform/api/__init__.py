"""The OpenAI-compatible REST API under /v1/ (chat completions, completions, models) for company tools.

Views (api.views) only parse, call and render; the flow of one call lives in api.completions, the
engine side in api.generation, OpenAI's wire format in api.openai_format, errors in api.errors.
"""
