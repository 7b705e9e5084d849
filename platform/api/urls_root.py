"""Mounted at the root by pagoda.urls: /tokenize and /detokenize, where vLLM serves them."""
from api.urls import root_urlpatterns

urlpatterns = root_urlpatterns
