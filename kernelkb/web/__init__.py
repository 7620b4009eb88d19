"""Web pages for people, served by the API's app: what worked per GPU and op, the
experience browser, optimizer runs. Server-rendered (Jinja2), no build step, no internet.
An entry module like kb/api: it may import retrieval; nothing imports it but the app."""
