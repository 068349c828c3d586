// Starts Swagger UI on /docs (served from the swagger-ui-bundle package's files, no CDN) over the API's
// own OpenAPI document. A file, not an inline script: the page keeps the server's Content-Security-Policy.
window.addEventListener("load", function () {
  // validatorUrl: null: no badge fetched from validator.swagger.io
  window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true, validatorUrl: null });
});
