"""Browser chat for employees: the chat page and its history (HTTP views) and one WebSocket per open
conversation (/ws/chat/<id>/, consumers.ChatConsumer) that streams the engine's replies.

Modules: protocol (the JSON frames), errors (what goes wrong, as frame codes), prompting (system prompt +
history -> prompt tokens), selectors / services (reads and writes of the chat flow), replies (one
reply's stream), consumers, routing, views, urls, ui_text (the page's strings, English and Korean).
"""
